"""pytest configuration shared by the doctests and the test suite."""

collect_ignore = ["calculator/__main__.py", "app.py", "app_pages"]

"""Dashboard pages run headless with Streamlit's AppTest: no exception and real output."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent


def run_page(page: str) -> AppTest:
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    app.run()
    app.switch_page(f"app_pages/{page}.py")
    app.run()
    assert not app.exception, app.exception
    return app


def test_registry_page_lists_accelerators_with_units():
    app = run_page("registry")
    table = app.dataframe[0].value
    h100 = table[table["id"] == "h100-sxm"].iloc[0]
    assert h100["memory_bandwidth"] == "3.35 TB/s"
    assert h100["memory"] == "80 GiB" and h100["memory_nameplate"] == "80 GB"


def test_registry_page_switches_section():
    app = run_page("registry")
    app.radio[0].set_value("models").run()
    assert not app.exception
    assert "llama-3.1-70b" in set(app.dataframe[0].value["id"])

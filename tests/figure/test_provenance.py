"""savefig: the files of each profile, and one rendering for the file and the page."""

import matplotlib.pyplot as plt
import pytest

from ntpcore.figure import claims, provenance


@pytest.mark.parametrize(
    ("profile", "suffixes"), [("quick", {".png"}), ("paper", {".png", ".pdf"})]
)
def test_the_quick_profile_writes_no_pdf(tmp_path, monkeypatch, profile, suffixes):
    """PDFs are paper quality: the paper profile's figures have one, the quick profile's
    (checks, CI) do not, and the sidecar lists exactly the files written."""
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="x")
    side = provenance.savefig(fig, "lin-files", {"a": 1}, profile=profile)
    plt.close(fig)
    images = {p.suffix for p in tmp_path.glob("lin-files.p*")}
    assert images == suffixes
    assert set(side["files"]) == {f"lin-files{s}" for s in suffixes} | {"lin-files.data.json"}


def test_in_a_kernel_the_page_shows_the_png_written_and_nothing_more(tmp_path, monkeypatch):
    """In a notebook the figure under the cell is the PNG just written, shown at the figure's
    on-screen size, and the figure is closed (the inline backend draws nothing more)."""
    import IPython.display

    shown = []
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    monkeypatch.setattr(claims, "_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    with plt.rc_context({"figure.dpi": 100, "savefig.dpi": 200, "savefig.bbox": None}):
        fig = plt.figure(figsize=(3, 2))
        provenance.savefig(fig, "lin-shown", profile="quick")
    assert len(shown) == 1
    assert shown[0].data == (tmp_path / "lin-shown.png").read_bytes()
    assert shown[0].width == 300  # 600 px saved at 200 dpi, shown at the figure's 100 dpi
    assert not plt.fignum_exists(fig.number)

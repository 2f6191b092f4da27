"""`extradeep report`: one self-contained HTML file whose figures are present and not blank."""

import base64
import io
from html.parser import HTMLParser
from pathlib import Path

import pytest
from matplotlib import image

from extradeep.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"
DATASET = ["--train-samples", "50000", "--val-samples", "10000", "--batch-size", "64"]
SECTIONS = [
    "Configurations and dataset",
    "Time and cost per epoch",
    "Speedup and efficiency",
    "Time/cost trade-off",
    "Where the time goes",
    "Top bottlenecks",
    "Accuracy and predictive power",
    "Methods",
]


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.headings, self.external, self._in = [], [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs["src"])
        if tag in ("script", "link") or (tag == "img" and not attrs["src"].startswith("data:")):
            self.external.append(tag)
        self._in = tag

    def handle_data(self, data):
        if self._in == "h2":
            self.headings.append(data)

    def handle_endtag(self, tag):
        self._in = None


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    cache = str(tmp_path_factory.getbasetemp() / "extradeep-cache")
    code = main(
        [
            "report",
            str(SAMPLES),
            "--param",
            "ranks",
            *DATASET,
            "--cache-dir",
            cache,
            "--eval-points",
            "12,16",
            "--max-time",
            "2h",
            "--epochs",
            "1000",
            "--max-cost",
            "40",
            "--predict",
            "32,64",
            "-o",
            str(out / "report.html"),
            "--plots",
            str(out / "figs"),
        ]
    )
    assert code == 0
    return out


def test_report_parses_and_has_every_section(report):
    page = Page()
    page.feed((report / "report.html").read_text(encoding="utf-8"))
    assert page.headings == SECTIONS
    assert not page.external  # self-contained: no scripts, stylesheets or linked images
    assert len(page.images) == 6


def test_embedded_images_are_pngs_with_content(report):
    page = Page()
    page.feed((report / "report.html").read_text(encoding="utf-8"))
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        pixels = image.imread(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), format="png")
        assert pixels.shape[0] > 200 and pixels.shape[1] > 300
        gray = pixels[..., :3].mean(axis=2)
        assert gray.std() > 0.05  # not blank
        assert (gray < 0.9).mean() > 0.01  # some ink on the page


def test_plots_are_saved_as_png_and_svg(report):
    names = {p.name for p in (report / "figs").iterdir()}
    for figure in ("epoch", "scaling", "tradeoff", "breakdown", "bottlenecks", "evaluation"):
        assert {f"{figure}.png", f"{figure}.svg"} <= names
    assert (report / "figs" / "epoch.svg").read_text().lstrip().startswith("<?xml")


def test_methods_and_numbers_are_in_the_text(report):
    text = (report / "report.html").read_text(encoding="utf-8")
    assert "n_t = floor((D_t/(G/M))/B)" in text and "never by refitting" in text
    assert "ranks=2" in text and "core-hours" in text

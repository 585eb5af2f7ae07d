"""The report: it names the built-in texts that a study used, not all three; its plot keeps the legend clear of the panels."""
import pytest

from galinear.compress.report.summary import texts_note


def test_note_names_only_the_texts_used():
    one = texts_note(["wikipedia"])
    assert "Wikipedia" in one and "Shakespeare" not in one and "King James" not in one and "stands in" in one
    two = texts_note(["wikipedia", "shakespeare"])
    assert "Wikipedia (lead paragraphs) and Shakespeare (modern spelling) stand in" in two
    assert "King James" not in two
    assert "the King James Bible" in texts_note(["wikipedia", "shakespeare", "kjv"])
    assert texts_note(["mytext"]) == ""
    assert "Wikipedia" in texts_note(["mytext", "wikipedia"])


def test_plot_legend_sits_below_the_panels(tmp_path, monkeypatch):
    """With many methods and layer sets the legend goes below the panels, inside the figure."""
    plt = pytest.importorskip("matplotlib.pyplot")
    from galinear.compress.report import summary as report

    rows = [{"layers": [], "method": "original", "params_per_layer": None,
             "log_ppl": {"a": {"mean": 2.0, "std": 0.0, "n": 1}}}]
    for layers in ([1], [2], [1, 2], [1, 2, 3]):
        for k, method in enumerate(("rotor", "lr1", "lr1-cf", "lr4", "lr4-cf", "bh1", "bh1-cf")):
            rows.append({"layers": layers, "method": method, "params_per_layer": 1000 * (k + 1),
                         "log_ppl": {"a": {"mean": 2.1 + 0.01 * k, "std": 0.01, "n": 3}}})
    kept = []
    monkeypatch.setattr(plt, "close", kept.append)
    path = report.plot_figure(rows, ["a"], str(tmp_path / "plot.png"))
    assert path and (tmp_path / "plot.png").stat().st_size > 0
    fig = kept[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    frame = fig.bbox
    assert legend.y0 >= frame.y0 and legend.x0 >= frame.x0 and legend.x1 <= frame.x1  # inside the figure
    for ax in fig.axes:  # and below every panel, its tick labels included
        assert legend.y1 <= ax.get_tightbbox(renderer).y0 + 1
    assert len(fig.legends[0].get_texts()) == 1 + 7 * 3  # original + each (method, set size) once

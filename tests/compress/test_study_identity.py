"""The compressed-model folders a study writes carry the identity of the model they were made for."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from galinear.compress import Study, load_compressed  # noqa: E402
from galinear.lm import models  # noqa: E402
from galinear.compress.storage.folder_format import read_config  # noqa: E402

from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, tiny_llama  # noqa: E402


def test_kept_folder_records_the_model_and_is_refused_by_another(tmp_path, tiny):
    study = Study(tiny_config(tmp_path, methods=("lr1",), layer_sets=((1,),), datasets=("a",), epochs=1.0),
                  tiny, texts=TEXTS)
    study.run(report=False)
    path = str(tmp_path / "models")  # its index.json names the one folder written
    identity = read_config(path)["model"]
    assert identity["name"] == "tiny-llama" and identity["hidden_size"] == 32 and identity["num_hidden_layers"] == 3
    other = tiny_llama(seed=5)  # same shapes, other weights
    before = models.projection(other, 1, "q_proj")
    with pytest.raises(ValueError, match="other weights"):
        load_compressed(other, path)
    assert models.projection(other, 1, "q_proj") is before  # nothing installed
    same = tiny_llama()
    assert type(load_compressed(same, path)[(1, "q_proj")]).__name__ == "LowRankLinear"

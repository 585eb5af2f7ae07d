"""Accuracy of the original and of compressed models on the offline next-sentence task, through lm-eval.

The task (galinear.data.choice): ITEMS questions built from the WikiText-2 test split that ships
with galinear (the evaluation text; no model is calibrated on it): one or two sentences of a
paragraph, then the sentence that follows them among four, the other three drawn from other
paragraphs at a similar length. lm-eval (``pip install galinear[eval]``) scores every model with
``HFLM(pretrained=model, tokenizer=tokenizer)``: accuracy by the summed log-likelihood of each
choice (acc) and by it per byte (acc_norm), with the binomial standard error.

    python benchmarks/eval_next_sentence.py --items 400 \
        --folders runs/demo/models/rotor-...-L12+13 runs/demo/models/kron-...-L12+13

Each folder is a compressed model written by ``galinear compress`` (``models/`` or ``--save``);
the original is the model those folders were compressed from (--model, SmolLM2 by default).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import command_line, header, markdown_table, metadata, write_text  # noqa: E402

TASK = "galinear_next_sentence"


def evaluate(model, tokenizer, tasks: str, batch_size: int) -> dict:
    """lm-eval's accuracy and length-normalised accuracy of ``model`` on the task in ``tasks``."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    lm = HFLM(pretrained=model, tokenizer=tokenizer, device="cpu", batch_size=batch_size)
    manager = TaskManager(include_path=tasks, include_defaults=False)
    result = simple_evaluate(model=lm, tasks=[TASK], task_manager=manager, bootstrap_iters=0, random_seed=0)
    scores = result["results"][TASK]
    count = len(result["samples"][TASK]) if "samples" in result else None
    return {"acc": scores["acc,none"], "acc_norm": scores["acc_norm,none"], "items": count}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=400, help="questions (default 400)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the question draw (default 0)")
    parser.add_argument("--model", default="smollm2-135m", help="the original model (galinear.lm.load_model)")
    parser.add_argument("--folders", nargs="*", default=[], help="compressed model folders to score")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=None, help="write the markdown table there")
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import torch

    from galinear.compress import load
    from galinear.data.choice import next_sentence_items, write_lm_eval_task
    from galinear.lm import load_model, wikitext

    if args.threads:
        torch.set_num_threads(args.threads)
    items = next_sentence_items(wikitext.read_file(), args.items, seed=args.seed)
    rows = []
    with tempfile.TemporaryDirectory() as tasks:
        write_lm_eval_task(tasks, items, name=TASK)
        original = load_model(args.model)
        runs = [("original", original.model, original.tokenizer)]
        for folder in args.folders:
            model, tokenizer = load(folder, with_tokenizer=True)
            runs.append((os.path.basename(os.path.normpath(folder)), model, tokenizer))
        for name, model, tokenizer in runs:
            score = evaluate(model, tokenizer, tasks, args.batch_size)
            n = len(items)
            se = {k: math.sqrt(score[k] * (1 - score[k]) / n) for k in ("acc", "acc_norm")}
            rows.append([name, f"{score['acc']:.3f} ± {se['acc']:.3f}", f"{score['acc_norm']:.3f} ± {se['acc_norm']:.3f}"])
            print(f"{name}: acc {rows[-1][1]}, acc_norm {rows[-1][2]}", flush=True)
    text = (header(metadata(command_line("benchmarks/eval_next_sentence.py", argv), packages=("torch", "transformers", "lm_eval"))) + "\n\n" + f"{len(items)} next-sentence questions from the WikiText-2 test split (seed "
            f"{args.seed}, four choices, chance 0.25); ± one binomial standard error.\n\n"
            + markdown_table(["model", "acc", "acc_norm"], rows) + "\n")
    print(text)
    if args.out:
        write_text(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

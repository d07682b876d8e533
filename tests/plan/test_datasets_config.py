"""Several datasets in one parameter document (``datasets:``): merging, validation, paths.

The paper preset ``configs/paper.yaml`` gives each corpus exactly the parameters of its
single-dataset preset, so the two DAGs share every job; no output path of one dataset is
an output path of another.
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO, tiny_params
from villani.dag import targets
from villani.plan.config import ParamsError, dataset_names, dataset_params, load_params, resolve
from villani.plan.digest import datasets_digest, stage_digest
from villani.plan.schedule import checkpoint_steps

TWO = {"train": {"steps": 40, "warmup_steps": 4},
       "datasets": {"a": {"train": {"lambdas": [0.0, 0.001], "steps": 20}},
                    "b": {"data": {"seq_len": 32, "source": "files", "files": {"train": "b.txt"}}}}}


def test_a_single_dataset_document_is_its_own_dataset():
    p = tiny_params()
    assert dataset_names(p) == ["tiny"] and p["datasets"] is None
    assert dataset_params(p, "tiny") is p
    with pytest.raises(ParamsError, match="dataset 'other' is not in the parameters"):
        dataset_params(p, "other")


def test_each_dataset_is_the_top_level_groups_with_its_entry_merged_over_them():
    p = resolve(TWO)
    assert dataset_names(p) == ["a", "b"]
    a, b = dataset_params(p, "a"), dataset_params(p, "b")
    assert a["data"]["name"] == "a" and b["data"]["name"] == "b"
    assert a["train"]["steps"] == 20 and b["train"]["steps"] == 40  # the entry wins, the rest is shared
    assert a["train"]["warmup_steps"] == b["train"]["warmup_steps"] == 4
    assert a["train"]["lambdas"] == [0.0, 0.001] and b["train"]["lambdas"] == p["train"]["lambdas"]
    assert b["data"]["seq_len"] == 32 and b["data"]["tokenizer"] == p["data"]["tokenizer"]
    assert a["datasets"] is None and b["datasets"] is None
    assert stage_digest(a, "tokenize") != stage_digest(b, "tokenize")
    assert datasets_digest([a, b], "paper") != datasets_digest([a, a], "paper")


def test_the_paper_preset_gives_each_corpus_its_single_dataset_preset():
    paper = load_params([REPO / "params.yaml", REPO / "configs/paper.yaml"])
    assert dataset_names(paper) == ["ptb", "wikitext103"]
    for name in dataset_names(paper):
        single = load_params([REPO / "params.yaml", REPO / f"configs/{name}.yaml"])
        assert dataset_params(paper, name) == single, name


@pytest.mark.parametrize("doc, start, fragment", [
    ({"datasets": {"a": {"train": {"steps": 2}}}}, "p.yaml: datasets.a: train.warmup_steps:", "≤ train.steps = 2"),
    ({"datasets": {"a": {"trian": {}}}}, "p.yaml: datasets.a.trian:", "unknown key"),
    ({"datasets": {"a": {"train": {"lambdas": [-1.0]}}}}, "p.yaml: datasets.a.train.lambdas[0]:", "≥ 0"),
    ({"datasets": {"a b": {}}}, "p.yaml: datasets:", "matching"),
    ({"datasets": {}}, "p.yaml: datasets:", "at least 1 key"),
    ({"datasets": {"a": {"data": {"name": "x"}}}}, "p.yaml: datasets.a.data.name:", "the entry's key 'a'"),
    ({"datasets": {"paper": {}}}, "p.yaml: datasets.paper: data.name:", "cross-dataset"),
    ({"data": {"name": "paper"}}, "p.yaml: data.name:", "cross-dataset"),
    ({"datasets": {"a": {"figures": {"formats": ["pdf"]}}}}, "p.yaml: datasets.a.figures.formats:",
     "shared by every dataset"),
])
def test_bad_datasets_name_the_dataset_and_key_in_one_line(doc, start, fragment):
    with pytest.raises(ParamsError) as e:
        resolve(doc, source="p.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(start) and fragment in msg, msg


@pytest.mark.slow  # 4 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_one_job_per_run_needs_the_datasets_to_share_their_checkpoints_and_segments():
    """jobs.measure / jobs.train: run name every checkpoint / segment of a run as one rule's
    outputs: the workflow refuses datasets that differ in them (the rest of villani ignores it)."""
    doc = resolve({**TWO, "jobs": {"measure": "run"}}, source="p.yaml")  # a valid document for every reader
    with pytest.raises(ParamsError) as e:
        targets.check_job_split(doc, source="p.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith('p.yaml: jobs.measure: "run" is invalid (checkpoint; '), msg
    assert "differ — checkpoints: a 5 up to step 20; b 5 up to step 40" in msg, msg
    with pytest.raises(ParamsError, match=r'^p.yaml: jobs.train: "run" is invalid \(segment; .* differ — segments: a '):
        targets.check_job_split(resolve({**TWO, "jobs": {"train": "run"}}), source="p.yaml")
    # seeds side by side (jobs.runs_per_device ≥ 2): one rule names every seed's files
    seeds = resolve({**TWO, "jobs": {"runs_per_device": 2}, "datasets": {**TWO["datasets"], "a": {"train": {
        "lambdas": [0.0], "steps": 20, "seeds": [0, 1, 2]}}}})
    with pytest.raises(ParamsError, match=r"^p.yaml: jobs.runs_per_device: 2 is invalid \(seeds side by side only where "
                                          r"every dataset has the same seeds, and here they differ — a \[0, 1, 2\]; "
                                          r"b \[0, 1\]\); use 1$"):
        targets.check_job_split(seeds, source="p.yaml")
    same = resolve({"train": {"steps": 40, "warmup_steps": 4}, "jobs": {"measure": "run", "train": "run"},
                    "datasets": {"a": {"train": {"lambdas": [0.0]}}, "b": {"data": {"seq_len": 32}}}})
    targets.check_job_split(same)
    assert dataset_params(same, "b")["jobs"] == {"measure": "run", "train": "run", "runs_per_device": 1}  # the workflow's, in each dataset's
    outs = targets.job_outputs(same, "measure", "{root}/runs/{dataset}/{variant}/lam{lam}/seed{seed}/step{step}.json")
    steps = [int(o.rsplit("step", 1)[1][:7]) for o in outs]
    assert outs[0].startswith("results/runs/{dataset}/{variant}/lam{lam}/seed{seed}/")
    assert steps == checkpoint_steps(dataset_params(same, "a")["train"]) and len(steps) > 2
    ends = [int(o.rsplit("seg", 1)[1][:7]) for o in targets.job_outputs(same, "train", "{root}/x/seg{step}.json")]
    assert ends == targets.segment_ends(dataset_params(same, "b")["train"])


def test_pyyaml_numeric_strings_inside_a_dataset_are_numbers():
    p = resolve({"datasets": {"a": {"train": {"lambdas": ["0.0", "1e-3"]}}}})
    assert dataset_params(p, "a")["train"]["lambdas"] == [0.0, 0.001]


def test_no_output_of_one_dataset_is_an_output_of_another():
    p = load_params([REPO / "params.yaml", REPO / "configs/paper.yaml"])
    per = {}
    for q in targets.per_dataset(p):
        ds = q["data"]["name"]
        files = (targets.segments(q) + targets.measurements(q) + targets.figure_inputs(q)
                 + targets.metrics_outputs(q) + [targets.fetch_record(q)] + targets.pretrained_files(q)
                 + list(targets.data_files(q).values()))
        assert all(f"/{ds}/" in f or f"/{ds}." in f for f in files), ds
        per[ds] = set(files)
    assert not per["ptb"] & per["wikitext103"]
    everything = targets.all_outputs(p)
    assert len(everything) == len(set(everything))
    paper = targets.paper_outputs(p)
    assert paper and all(f.startswith(("results/figures/paper/ptb+wikitext103/",
                                       "results/tables/paper/ptb+wikitext103/")) for f in paper)
    assert {"results/tables/paper/ptb+wikitext103/table2_corpora.csv",
            "results/tables/paper/ptb+wikitext103/table3_trace_stats.csv"} <= set(paper)
    single = targets.paper_outputs(load_params([REPO / "params.yaml", REPO / "configs/ptb.yaml"]))
    assert not set(single) & set(paper)  # a run of one dataset never overwrites the outputs of both


def test_cli_needs_dataset_when_the_document_names_several(tmp_path, capsys):
    from villani.cli import main
    from villani.plan.config import dump_yaml

    cfg = tmp_path / "two.yaml"
    dump_yaml(resolve(TWO), cfg)
    assert main(["bounds", "--params", str(cfg), "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("villani: error: --dataset: required, the parameters name several datasets (a, b); the DVC "
                   "mirror runs one dataset per parameter file (docs/ARCHITECTURE.md)")
    assert main(["bounds", "--params", str(cfg), "--dataset", "c"]) == 2
    assert "--dataset: 'c' is not in the parameters (datasets: a, b)" in capsys.readouterr().err
    assert main(["validate", "--params", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "ok: a: 4 runs" in out and "ok: b: 6 runs" in out

"""Data stage: raw text → tokenizer → fixed-length token blocks per split (Parquet).

- ``tokenize(data_cfg, out_dir) -> dict``: read the source's train/validation/test text,
  train (byte-level BPE) or load (pretrained) the tokenizer, cut each split's token
  stream into contiguous blocks of ``seq_len`` tokens, write ``tokenizer.json``,
  ``{split}.parquet`` and ``stats.json`` to ``out_dir``; return the stats.
- ``load_blocks(path) -> torch.LongTensor (N, seq_len)``: read one split's blocks;
  ``load_split(params, root, split)``: the same, checked against ``stats.json`` (what stages use).
- ``load_tokenizer(out_dir) -> transformers.PreTrainedTokenizerFast``: the saved tokenizer.

The stats are read back with :func:`villani.io.results.read_stats`. ``villani fetch`` (``villani.data.fetch.fetch(params) -> dict``) downloads once what
these read from the Hugging Face hub — corpus, pretrained tokenizer, pretrained model —
into the Hugging Face cache, so that every stage after it runs with ``HF_HUB_OFFLINE=1``.

Details per module: ``sources`` (text per split), ``hub`` (the Hugging Face cache),
``fetch``, ``tokenizer``, ``blocks``, ``baselines`` (the unigram and bigram validation
perplexity recorded in ``stats.json``), ``stage``.
"""

from villani.data.blocks import load_blocks, load_split
from villani.data.stage import tokenize
from villani.data.tokenizer import load_tokenizer

__all__ = ["tokenize", "load_blocks", "load_split", "load_tokenizer"]

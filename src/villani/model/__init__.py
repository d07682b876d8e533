"""The causal LM: build it from the parameters, open a pretrained one, its Hugging Face files
and the ``pretrained`` stage (:mod:`.causal_lm`)."""

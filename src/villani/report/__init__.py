"""What a researcher opens: the Snakemake report's description (:mod:`.description`) and
captions (``*.rst``, package data), and the offline page of ``dvc plots show``
(:mod:`.dvc_page`)."""

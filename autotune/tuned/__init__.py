"""What production applies: the tuned configuration, its file, its compile artifacts and framework hand-offs.

``autotune.load("tuned.yaml")`` (:func:`autotune.tuned.file.load`) returns a
:class:`~autotune.tuned.config.TunedConfig`, whose ``apply()`` runs the knob code every trial ran
(:mod:`autotune.knobs`), loads the shipped compile (:mod:`autotune.tuned.artifacts`) and hands the result
to Lightning or the Hugging Face Trainer (:mod:`autotune.tuned.frameworks`). Nothing here reads a study:
writing the file is a view of the records (:mod:`autotune.views.export`).

The package itself imports nothing, so a trial that needs only :mod:`autotune.tuned.artifacts` does not pay
for torch's data loader and the framework hand-offs.
"""

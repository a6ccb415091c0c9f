"""The API server's admission of DRA objects and pods, re-expressed in pure Python (no I/O).

See :mod:`.admit` for the pipeline (decode, default, drop disabled fields, validate) and
:mod:`.verdict` for the error form.
"""

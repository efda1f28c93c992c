"""The prepare pipeline (spec §2), one module per stage under the spec's names.

``prepare.py`` composes the stages; ``prune``, ``project``, ``normalize``, ``assemble`` and
``budget`` are the whole-list stage functions (spec §2.1–§2.4, §3.1), ``salient`` the lines the
cutting stages keep, ``provenance`` where each message came from, ``item_caps`` the caps of
authored items. ``one_pass/`` is the fast path that runs stages 1–4 as one walk; the stage
functions are its test oracle (tests/core/ prove both give byte-identical requests).
"""

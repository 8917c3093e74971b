"""Worked answers to the chapter's exercises that need code of their own (docs/paged_host.md,
"Worked answers"). The chapter's code (model/paged_lm.py) stays as the book prints it: each answer
builds on it from here, by subclassing or composition.

    sinks.py          exercise 3: attention sinks (the gather, the release, the float reference,
                      the calibration)
    sinks_checks.py   its checks, with expected values computed independently
                      (run them with ``python tools/ch15_sinks.py``)
"""

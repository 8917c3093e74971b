"""The book's name for the replay image: ``record(code, ext)``.

``record(code, ext)`` runs the machine model on one program and its external memory image and
returns the words the testbench reads for it (docs/replay.md): the code, the image, and what the
model expects of the external memory, the scratchpad and the seven cycle counters. The chapter's
listing writes the number of programs and then each record to ``out/ga2_programs.hex``. The image
format lives in ``replay.image``; this module keeps the name the listings import.
"""

from replay import image


def record(code, ext) -> list[int]:
    """The words of one program's record (its CRC slot 0: the chapter's image form)."""
    return image.record(code, ext).words()

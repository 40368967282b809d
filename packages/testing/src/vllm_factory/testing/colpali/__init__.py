"""The ColPali family's shared kit: the colpali-engine reference venv, test images drawn from
a corpus' image specs and the reference encoder (see :mod:`.references`)."""

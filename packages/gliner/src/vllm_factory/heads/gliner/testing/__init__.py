"""The test suite every GLiNER model package runs against its own served checkpoint.

Not imported by the library: it needs pytest, numpy and httpx. A package's
``tests/conftest.py`` defines the session fixture ``gliner_reference`` (its reference module,
with ``reference_dir()`` and ``CORPUS``) and imports the fixtures from :mod:`.fixtures`; its
test modules import the tests from :mod:`.parity` and :mod:`.requests`, so pytest collects
them there. The backbone is the only thing that differs between the packages.
"""

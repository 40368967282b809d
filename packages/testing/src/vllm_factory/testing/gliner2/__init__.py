"""The GLiNER2 reference kit: the gliner2 venv, the parity cases and gliner2's own outputs on a
tiny random checkpoint (see :mod:`vllm_factory.testing.gliner2.references`)."""

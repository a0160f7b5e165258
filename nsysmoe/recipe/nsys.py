"""The ``nsys recipe nsysmoe`` Recipe class (imported by the recipe framework only: it needs
``nsys_recipe``, which ships with Nsight Systems).

    NSYS_RECIPE_PATH=$(nsysmoe recipe-path) nsys recipe nsysmoe --input REPORTS_OR_DIRS \\
        [--versus REPORTS_OR_DIRS] [--vary NAME] [--labels OFF,ON] --output OUT [--mode MODE]

The mapper analyses each report in the framework's workers (``--mode``: none, concurrent,
dask-futures, as NVIDIA's recipes); the reducer makes them one run — or, with ``--versus``, an
A/B of the ``--input`` reports (off) against the ``--versus`` ones (on), paired in sorted
order — and writes :func:`nsysmoe.recipe.outputs.write_outputs` into OUT, with the framework's
``.nsys-analysis`` file.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from nsys_recipe.lib import args as recipe_args
from nsys_recipe.lib import recipe

import nsysmoe
from nsysmoe.errors import NsysmoeError
from nsysmoe.recipe import outputs


def _analyze(path: str) -> Any:
    return outputs.analyze_report(path)


def _compare(pair: tuple[str, str], vary: tuple[str, ...], labels: tuple[str, str] | None) -> Any:
    return outputs.compare_reports(pair, vary, labels)


class NsysmoeRecipe(recipe.Recipe):
    """nsysmoe's analysis of each report, the run they make, or an A/B (``--versus``)."""

    recipe_dir = str(Path(nsysmoe.__file__).resolve().parent)  # where metadata.json is
    recipe_name = "nsysmoe"

    def run(self, context: Any) -> None:
        super().run(context)
        args = self._parsed_args
        off = sorted(args.input)
        on = sorted(args.versus or [])
        try:
            if on:
                labels = tuple(args.labels.split(",")) if args.labels else None
                if labels is not None and len(labels) != 2:
                    raise NsysmoeError(f"--labels {args.labels!r}: two names, OFF,ON")
                fn = partial(_compare, vary=tuple(args.vary or ()), labels=labels)
                results = context.wait(context.map(fn, list(zip(off, on, strict=False))))
                result = outputs.combine_ab(results, len(off), len(on))
            else:
                results = context.wait(context.map(_analyze, off))
                result = outputs.combine(results)
        except NsysmoeError as exc:
            raise recipe_error(str(exc)) from None
        folder = Path(self.get_output_dir())
        for name, kind in outputs.write_outputs(result, folder).items():
            self._output_files[name] = kind
        self._analysis_dict.update({"EndTime": str(datetime.now()), "InputFiles": off,
                                    "VersusFiles": on, "Outputs": self._output_files})  # fmt: skip
        self.create_analysis_file()

    @classmethod
    def get_argument_parser(cls) -> Any:
        parser = super().get_argument_parser()
        parser.add_recipe_argument(recipe_args.Option.INPUT, required=True)
        parser.add_recipe_argument(recipe_args.Option.OUTPUT)
        parser.add_recipe_argument(recipe_args.Option.FORCE_OVERWRITE)
        group = parser.recipe_group
        group.add_argument("--versus", type=recipe_args.process_input, nargs="+",
                           action=recipe_args.InputAction, default=None,
                           help="The B side of an A/B (overlap on): reports or directories, "
                                "paired with --input's in sorted order")  # fmt: skip
        group.add_argument("--vary", action="append", default=None,
                           help="The variable under test in an A/B (nsysmoe --vary)")
        group.add_argument("--labels", default=None, help="Names of the A/B sides: OFF,ON")
        return parser


def recipe_error(message: str) -> Exception:
    """The framework's own error type, which it logs as one line and exits 1 on."""
    import nsys_recipe

    return nsys_recipe.ValueError(message)

"""An import-linter contract type: modules that must run on a bare GPU machine (DESIGN §2) import, directly
or through other modules, nothing outside the standard library and an allow-list of packages.

import-linter's own contracts forbid named modules; this one allows named ones, so a dependency added to
an extra later is caught without editing the contract. Registered in pyproject.toml's
[tool.importlinter] ``contract_types``; the graph must include external packages.
"""

from __future__ import annotations

import sys
from typing import Any

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output
from importlinter.application import contract_utils


class AllowedExternalsContract(Contract):
    """Configuration: ``source_modules`` (packages), ``allowed_externals`` (top-level package names beside
    the standard library), ``ignore_imports`` (import expressions, optional)."""

    type_name = "allowed_externals"

    source_modules = fields.ListField(subfield=fields.StringField())
    allowed_externals = fields.ListField(subfield=fields.StringField())
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph,
            ignore_imports=self.ignore_imports,  # type: ignore[arg-type]
            unmatched_alerting=contract_utils.AlertLevel.ERROR,
        )
        allowed = set(self.allowed_externals) | set(sys.stdlib_module_names)  # type: ignore[call-overload]
        broken: list[dict[str, Any]] = []
        for source in self.source_modules:  # type: ignore[attr-defined]
            for module in sorted(graph.find_upstream_modules(source, as_package=True)):
                if graph.is_module_squashed(module) and module.split(".")[0] not in allowed:
                    chain = graph.find_shortest_chain(importer=source, imported=module, as_packages=True)
                    broken.append({"source": source, "external": module, "chain": list(chain or ())})
        return ContractCheck(
            kept=not broken,
            warnings=list(removal.warnings),
            ignored_import_count=removal.ignored_import_count,
            metadata={"broken": broken},
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        for item in check.metadata["broken"]:
            output.print_error(f"{item['source']} imports {item['external']}: {' -> '.join(item['chain'])}")
            output.new_line()

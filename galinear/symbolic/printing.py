"""Printing of symbolic multivectors: plain text, repr, LaTeX and sympy's printers (sympy only).

A mixin of :class:`galinear.symbolic.multivector.MultiVector`.
"""
from __future__ import annotations

import sympy as sp

from galinear import blades

__all__ = ["MultiVectorPrinting"]


class MultiVectorPrinting:
    """Printing methods of :class:`~galinear.symbolic.multivector.MultiVector`."""

    def _terms(self, latex: bool):
        names = blades.blade_names(self.n)
        masks = blades.shortlex_bitmasks(self.n).tolist()
        for name, mask, c in zip(names, masks, self.coefficients):
            if c == 0:
                continue
            if latex:
                idx = ",".join(str(i + 1) for i in range(self.n) if mask >> i & 1) if self.n >= 10 else name[1:]
                blade_tex = "" if mask == 0 else rf"e_{{{idx}}}"
                yield c, blade_tex
            else:
                yield c, "" if mask == 0 else name

    def __str__(self):
        parts = []
        for c, blade_name in self._terms(latex=False):
            text = str(c)
            if blade_name:
                if text in ("1", "-1"):
                    text = blade_name if text == "1" else f"-{blade_name}"
                elif isinstance(c, sp.Add):
                    text = f"({text})*{blade_name}"
                else:
                    text = f"{text}*{blade_name}"
            parts.append(text)
        if not parts:
            return "0"
        out = parts[0]
        for part in parts[1:]:
            out += f" - {part[1:]}" if part.startswith("-") else f" + {part}"
        return out

    def __repr__(self):
        return f"MultiVector(Cl{self.metric if any(m != 1 for m in self.metric) else '(' + str(self.n) + ')'}: {self})"

    def latex(self) -> str:
        r"""LaTeX source, e.g. ``a_{1} b_{2} - a_{2} b_{1}\, e_{12}`` joined with ``+``."""
        parts = []
        for c, blade_tex in self._terms(latex=True):
            body = sp.latex(c)
            if blade_tex:
                if isinstance(c, sp.Add):
                    body = rf"\left({body}\right)"
                body = rf"{body}\, {blade_tex}" if body not in ("1", "-1") else (
                    blade_tex if body == "1" else f"-{blade_tex}"
                )
            parts.append(body)
        if not parts:
            return "0"
        out = parts[0]
        for part in parts[1:]:
            out += f" {part}" if part.startswith("-") else f" + {part}"
        return out

    def _repr_latex_(self):
        return f"${self.latex()}$"

    # sympy's printers call these: sp.latex(A), sp.pretty(A), sp.sstr(A)
    def _latex(self, printer=None):
        return self.latex()

    def _sympystr(self, printer=None):
        return str(self)

    def _pretty(self, printer):
        from sympy.printing.pretty.stringpict import prettyForm

        out = None
        for c, name in self._terms(latex=False):
            negative = c.could_extract_minus_sign()
            size = -c if negative else c
            if name and size == 1:
                term = prettyForm(name)
            else:
                term = printer._print(size)
                if name and isinstance(size, sp.Add):
                    term = prettyForm(*term.parens())
                if name:
                    term = prettyForm(*term.right(" " + name))
            if out is None:
                out = prettyForm(*term.left("-")) if negative else term
            else:
                out = prettyForm(*out.right(" - " if negative else " + ", term))
        return prettyForm("0") if out is None else out

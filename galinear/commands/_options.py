"""Which options a command line gave, and the refusal of options that have no effect.

``galinear.cli`` marks every option's action so that parsing records the destinations the user
actually gave (:func:`record_given`); a command reads them with :func:`given` (a default typed
out again, ``--rank 8``, counts as given). :func:`refuse_unused` names an option that does
nothing in the combination given, and the option it needs. Standard library only.
"""
import argparse

__all__ = ["record_given", "given", "flag", "refuse_unused", "refuse_with_report_only", "refuse_repeats",
           "apply_threads", "check_threads"]

_GIVEN = "_given"


def record_given(parser: argparse.ArgumentParser) -> None:
    """Make every optional action of ``parser`` add its ``dest`` to ``namespace._given`` when used."""
    for action in parser._actions:
        if not action.option_strings or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        base = type(action)

        def call(self, parser, namespace, values, option_string=None, _base=base):
            given_options = getattr(namespace, _GIVEN, None)
            if given_options is None:
                given_options = {}
                setattr(namespace, _GIVEN, given_options)
            given_options[self.dest] = self.option_strings[-1] if option_string is None else option_string
            _base.__call__(self, parser, namespace, values, option_string)

        action.__class__ = type(base.__name__, (base,), {"__call__": call})


def given(args) -> frozenset:
    """The destinations of the options given on the command line (empty when not parsed by galinear.cli)."""
    return frozenset(getattr(args, _GIVEN, ()) or ())


def flag(dest: str, args=None) -> str:
    """The option string that set ``dest`` (``--no-progress`` for ``progress``), else ``--dest-with-dashes``."""
    used = getattr(args, _GIVEN, None) or {}
    return used.get(dest) or "--" + dest.replace("_", "-")


def refuse_unused(args, rules, names=None) -> None:
    """Raise ValueError for the first option given that has no effect.

    ``rules``: (dest, applies, why) triples; ``applies`` is a bool (the option has an effect in the
    combination given), ``why`` says what it needs, naming the other option. ``names`` maps a
    dest to its option string where it is not ``--dest-with-dashes``.
    """
    chosen = given(args)
    names = names or {}
    for dest, applies, why in rules:
        if dest in chosen and not applies:
            raise ValueError(f"{names.get(dest, flag(dest, args))} has no effect here: {why}; drop it or change the other "
                             "option")


def refuse_with_report_only(args, allowed) -> None:
    """``--report-only`` rewrites the report from saved runs: every other option given except
    ``allowed`` (destinations) trains nothing and is refused."""
    if not getattr(args, "report_only", False):
        return
    extra = sorted(given(args) - set(allowed) - {"report_only"})
    if extra:
        raise ValueError(f"{', '.join(flag(dest, args) for dest in extra)} {'has' if len(extra) == 1 else 'have'} no effect "
                         "with --report-only, which only rewrites the report from the saved runs; drop "
                         f"{'it' if len(extra) == 1 else 'them'} or drop --report-only")


def refuse_repeats(values, option: str) -> None:
    """``--seeds 1 1``: a value given twice would train (and report) the same run twice."""
    seen = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{option} lists {value} twice; give each once")
        seen.add(value)


def apply_threads(threads):
    """Apply ``--threads``: a count for torch and numba, or "auto" (a
    :class:`galinear.optim.threads.ThreadGovernor` installed for every training loop of this
    process); None leaves the libraries' defaults. Returns the governor or None."""
    from galinear.optim import threads as policy

    if threads == "auto":
        return policy.install()
    if threads:
        policy.set_counts(threads)
    return None


def check_threads(threads) -> None:
    """Refuse more torch threads than this machine has cores (each thread holds its own buffers),
    before torch is imported."""
    import os

    if threads is None or threads == "auto":
        return
    cores = os.cpu_count() or 1
    if threads > cores:
        from galinear._limits import TooLargeError

        raise TooLargeError(f"--threads {threads:,} is more than the {cores} CPU core(s) of this machine: every thread "
                            f"takes its own memory and the extra ones only wait; use --threads {cores} or fewer")

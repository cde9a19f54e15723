"""Every console script sets logging up the same way, once, before its body runs."""

from __future__ import annotations

import configparser
import importlib
import logging
import re
from pathlib import Path

import click
import pytest

from asrdist.cli import LOG_FORMAT, AsrdistCommand

SETUP_CFG = Path(__file__).resolve().parents[2] / "setup.cfg"


def _console_scripts() -> dict[str, str]:
    cfg = configparser.ConfigParser()
    cfg.read(SETUP_CFG)
    lines = cfg["options.entry_points"]["console_scripts"].strip().splitlines()
    return dict(line.replace(" ", "").split("=") for line in lines)


def _load(target: str) -> click.Command:
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("script", "target"), sorted(_console_scripts().items()))
def test_every_console_script_sets_logging_up_alike(script, target, monkeypatch):
    """Each command, or each mode of a command with modes (asrdist-score's subcommands)."""
    top = _load(target)
    commands = list(top.commands.values()) if isinstance(top, click.Group) else [top]
    calls: list = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: calls.append(kw))
    monkeypatch.setattr(click.Command, "invoke", lambda self, ctx: calls.append("body"))
    for cmd in commands:
        assert isinstance(cmd, AsrdistCommand), f"{script} is not made with asrdist.cli.command"
        calls.clear()
        cmd.invoke(click.Context(cmd))
        assert calls == [{"level": logging.INFO, "format": LOG_FORMAT}, "body"], script


def test_a_record_carries_its_time_and_level_and_the_message_unchanged():
    record = logging.LogRecord("asrdist.x", logging.WARNING, __file__, 1, "disk %s", ("full",),
                               None)
    line = logging.Formatter(LOG_FORMAT).format(record)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING disk full", line), line

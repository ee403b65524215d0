"""The one node-name rule: the config file, ``--node``, the host name and the scontrol transport
accept exactly the same names."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spurinv import nodename
from spurinv.cli.app import _node_flag
from spurinv.config import settings as config
from spurinv.controller.scontrol import Scontrol
from spurinv.errors import ConfigError, UsageError

# the rule as ARCHITECTURE.md states it, written out independently
RULE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
names = st.one_of(
    st.from_regex(RULE, fullmatch=True),
    st.text(alphabet="aZ09_.-/?#[],ÄL \n\0", max_size=70),
    st.sampled_from(["ALL", "all", "aLl", "n[1-4]", "n1,n2", "-h", ".x", "x" * 64, "x" * 65, "n1\n", ""]),
)


@given(name=names)
def test_every_place_applies_the_one_rule(name):
    valid = RULE.fullmatch(name) is not None
    assert nodename.valid(name) == valid

    try:
        config.Config.model_validate({"node": {"name": name}})
        in_file = True
    except ValueError:
        in_file = False
    assert in_file == (valid or name == "")

    try:
        _node_flag(name)
        flag = True
    except UsageError:
        flag = False
    assert flag == valid

    try:
        config.Config().node_name(name)
        host = True
    except ConfigError:
        host = False
    assert host == (RULE.fullmatch(name.split(".", 1)[0]) is not None)

    try:
        Scontrol(config.ControllerSection(transport="scontrol", scontrol="/bin/true"), name, {})
        scontrol = True
    except ConfigError:
        scontrol = False
    assert scontrol == (valid and name.upper() != "ALL")


@pytest.mark.parametrize(("name", "every"), [("ALL", True), ("all", True), ("All", True), ("ALL1", False), ("n1", False)])
def test_scontrol_reads_all_in_any_case_as_every_node(name, every):
    assert nodename.every_node(name) == every
    assert config.Config.model_validate({"controller": {"transport": "scontrol"}}).misread(name) == every
    assert not config.Config().misread(name)

"""Migrations apply, roll back and re-apply, and match the models."""

from __future__ import annotations

import asyncio
import os

from alembic import command
from alembic.config import Config

from app.cli import migrations_dir
from tests.conftest import _drop_database, _recreate_database


def _config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["database_url"] = url
    config.attributes["skip_logging"] = True
    return config


def test_upgrade_downgrade_upgrade_and_check() -> None:
    name = f"understudy_scratch_{os.getpid()}"
    url = asyncio.run(_recreate_database(name))
    config = _config(url)
    command.upgrade(config, "head")
    command.downgrade(config, "base")
    command.upgrade(config, "head")
    command.check(config)  # raises when the models and the migrations disagree
    asyncio.run(_drop_database(name))

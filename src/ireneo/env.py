"""Moved to ireneo.config, the one module that reads IRENEO_* variables; kept until every
importer names ireneo.config."""

from ireneo.config import model_cache as model_cache

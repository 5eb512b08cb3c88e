"""What a migrated database is, read from its catalog: two databases with equal snapshots have
the same tables, columns, constraints, indexes, views, policies, grants, functions, triggers,
default privileges and reference rows, whatever history built them."""

from __future__ import annotations

from typing import Any

import psycopg

QUERIES = {
    "relations": """
        SELECT c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity,
               coalesce(c.relacl::text, '')
          FROM pg_class c WHERE c.relnamespace = 'mdame'::regnamespace ORDER BY 1""",
    "columns": """
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               coalesce(pg_get_expr(d.adbin, d.adrelid), ''), a.attidentity,
               row_number() OVER (PARTITION BY c.relname ORDER BY a.attnum)
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         WHERE c.relnamespace = 'mdame'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
         ORDER BY 1, 7""",
    "constraints": """
        SELECT conrelid::regclass::text, conname,
               -- (a AND b) AND c reads back as a AND b AND c: compare without grouping
               regexp_replace(pg_get_constraintdef(oid), '[()]', '', 'g')
          FROM pg_constraint WHERE connamespace = 'mdame'::regnamespace ORDER BY 1, 2""",
    "indexes": """
        SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'mdame' ORDER BY 1""",
    "views": """
        SELECT viewname, definition FROM pg_views WHERE schemaname = 'mdame' ORDER BY 1""",
    "policies": """
        SELECT tablename, policyname, permissive, roles::text, cmd, coalesce(qual, ''),
               coalesce(with_check, '')
          FROM pg_policies WHERE schemaname = 'mdame' ORDER BY 1, 2""",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid),
               coalesce(p.proacl::text, ''), pg_get_userbyid(p.proowner)
          FROM pg_proc p WHERE p.pronamespace = 'mdame'::regnamespace ORDER BY 1, 2""",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(t.oid), tgenabled
          FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE c.relnamespace = 'mdame'::regnamespace AND NOT tgisinternal ORDER BY 1, 2""",
    "sequences": """
        SELECT sequencename, data_type::text, increment_by, min_value, max_value, cycle
          FROM pg_sequences WHERE schemaname = 'mdame' ORDER BY 1""",
    "default_privileges": """
        SELECT coalesce(defaclnamespace::regnamespace::text, ''), defaclobjtype,
               defaclacl::text
          FROM pg_default_acl WHERE defaclrole = (SELECT nspowner FROM pg_namespace
                                                   WHERE nspname = 'mdame')
         ORDER BY 1, 2""",
    "schema_privileges": """
        SELECT coalesce(nspacl::text, '') FROM pg_namespace WHERE nspname = 'mdame'""",
    "work_kinds": "SELECT kind, table_name, initial_state FROM mdame.work_kinds ORDER BY 1",
    "work_states": "SELECT kind, state, is_terminal FROM mdame.work_states ORDER BY 1, 2",
    "allowed_transitions": "SELECT * FROM mdame.allowed_transitions ORDER BY 1, 2, 3",
    "master_keys": "SELECT current_key_id, previous_key_id, rotated_at FROM mdame.master_keys",
    "environment": "SELECT env FROM mdame.environment",
}


def snapshot(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in QUERIES.items()}


def differences(left: dict[str, list[tuple[Any, ...]]], right: dict[str, list[tuple[Any, ...]]]):
    """Per part of the catalog, the rows only one side has (empty: the same database shape)."""
    out = {}
    for name in QUERIES:
        only_left = sorted(set(left[name]) - set(right[name]), key=repr)
        only_right = sorted(set(right[name]) - set(left[name]), key=repr)
        if only_left or only_right:
            out[name] = {"only_left": only_left[:5], "only_right": only_right[:5]}
    return out

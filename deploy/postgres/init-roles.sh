#!/bin/sh
# Runs once, when the PostgreSQL volume is first initialised (mounted into /docker-entrypoint-initdb.d). Creates the
# database, owned by the role that runs the migrations (`modelgate migrate`, DATABASE_MIGRATION_URL), and the role the
# replicas serve with (DATABASE_URL), which may only connect here: `modelgate migrate` grants it the rest, INSERT and
# SELECT only on the audit log. Neither role is a superuser; the superuser (POSTGRES_USER) only runs this script.
# The names default to those in compose.yaml's URLs; MODELGATE_DB_NAME, MODELGATE_DB_OWNER and MODELGATE_DB_APP
# change them.
set -eu
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-postgres}" \
  -v db="${MODELGATE_DB_NAME:-modelgate}" \
  -v owner="${MODELGATE_DB_OWNER:-modelgate_owner}" \
  -v app="${MODELGATE_DB_APP:-modelgate_app}" \
  -v owner_password="${MODELGATE_DB_OWNER_PASSWORD:?set MODELGATE_DB_OWNER_PASSWORD}" \
  -v app_password="${MODELGATE_DB_APP_PASSWORD:?set MODELGATE_DB_APP_PASSWORD}" <<'SQL'
CREATE ROLE :"owner" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'owner_password';
CREATE ROLE :"app" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'app_password';
CREATE DATABASE :"db" OWNER :"owner";
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"db" TO :"app";
\connect :"db"
-- The owner creates the tables; nobody else may create anything (PostgreSQL before 15 let every role create in public).
ALTER SCHEMA public OWNER TO :"owner";
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO :"app";
SQL

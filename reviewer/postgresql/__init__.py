"""Django's PostgreSQL backend, with a connection pool that comes back at once after a failover (base.py)."""

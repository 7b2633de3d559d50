"""The API's routes, one module per concern (jobs, status, circuits and keys, workers, health);
each module's ``routes(ctx)`` returns its group and ``cuzk.api.app.create_app`` composes them."""

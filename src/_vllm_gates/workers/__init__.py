"""The processes that run the judged code: worker main loop, the judge's pool, sandbox, Landlock, lifeline."""

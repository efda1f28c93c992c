"""What routes take from their large bodies, as core values (``app.api.jsonbody.BodyInput``)."""

"""The testing API's responses as Pydantic models: the contract the server builds its
answers from and the HTTP client parses them into.

A bottom layer: it imports pydantic and the standard library only, nothing else of
`app`, so the server (routers, MCP tools) and the client package, which must not import
the server, can both use it. Field names are snake_case in Python and camelCase on the
wire; a field a response leaves out when it does not apply is declared with
`exclude_if`, so `model_dump(mode="json", by_alias=True)` is the JSON the API sends.
Unknown fields are ignored when parsing, so a client keeps working against a newer
server.
"""

"""The console: server-rendered pages for people (CONSOLE.md), served by the API process
under `/`. Pages call the same services as the REST API; `install_console` (app.main)
adds them outside the OpenAPI document."""

"""Two weeks in the life of an operations lead: the same as `ireneo demo`.

    python examples/demo.py            # narrated, with rich
    python examples/demo.py --json     # one JSON document

It starts a real ireneo server on 127.0.0.1 (a free port, a temporary memory, a fresh ingest key
and token secret), posts the conversations of examples/two_weeks/ turn by turn as a chat gateway
does, and asks the questions through recall_my_conversations over MCP, as alice and as bob.
"""

from ireneo.demo import demo

if __name__ == "__main__":
    demo()

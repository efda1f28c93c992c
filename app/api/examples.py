"""Complete, realistic request examples for every operation that takes a body.

Each works as-is in Swagger UI's "Try it out" (the ids they name exist in every deployment: the
built-in ``local`` model, or resources the path names); ``tests/api/test_openapi_examples.py``
posts every one of them to a live app and requires the documented success status.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AGENT_MESSAGE",
    "API_KEY",
    "APPEND",
    "COMPACT",
    "ITEMS",
    "MODEL",
    "POP",
    "PREPARE",
    "REWIND",
    "SESSION_CREATE",
    "SESSION_PATCH",
    "SESSION_PREPARE",
    "TOKEN_COUNT",
    "TOOL_RESULTS",
    "TURN_START",
]

Examples = dict[str, dict[str, Any]]

_READ_TOOL = {
    "name": "read_file",
    "description": "Read a UTF-8 text file of the workspace.",
    "input_schema": {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Relative to the workspace."}},
        "required": ["path"],
    },
}

_CONVERSATION = [
    {
        "role": "user",
        "content": [{"type": "text", "text": "What does README.md say about installing?"}],
        "origin": {"type": "real", "message_id": "m1", "sequence": 1},
    },
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me read it."},
            {
                "type": "tool_call",
                "id": "call_1",
                "name": "read_file",
                "input": '{"path": "README.md"}',
            },
        ],
        "origin": {"type": "real", "message_id": "m2", "sequence": 2},
    },
    {
        "role": "tool",
        "content": [
            {
                "type": "tool_result",
                "id": "call_1",
                "name": "read_file",
                "output": [{"type": "text", "text": "# Demo\n\nInstall with `pip install demo`."}],
                "state": "success",
            }
        ],
        "origin": {"type": "real", "message_id": "m3", "sequence": 3},
    },
]

_SYSTEM = [
    {
        "key": "core/agent-system",
        "content": [{"type": "text", "text": "You are a careful coding agent."}],
    }
]

PREPARE: Examples = {
    "inline_model": {
        "summary": "A tool round trip, measured for an inline model",
        "value": {
            "system_context": _SYSTEM,
            "conversation": _CONVERSATION,
            "tools": [_READ_TOOL],
            "model": {
                "context_window_tokens": 200_000,
                "max_output_tokens": 32_000,
                "token_counter": "estimate",
            },
            "tool_result_pruning": {"through_sequence": None, "spill_directory": None},
            "encode": None,
        },
    },
    "registered_model_encoded": {
        "summary": "The same for a registered model, encoded as an Anthropic Messages body",
        "value": {
            "system_context": _SYSTEM,
            "conversation": _CONVERSATION,
            "tools": [_READ_TOOL],
            "model_id": "local",
            "encode": "anthropic_messages",
        },
    },
}

TOKEN_COUNT: Examples = {
    "text": {
        "summary": "Raw text with an exact tokenizer",
        "value": {"counter": "tiktoken:o200k_base", "text": "How many tokens is this?"},
    },
    "content": {
        "summary": "A content array, as sent",
        "value": {"content": _CONVERSATION[1]["content"]},
    },
    "prepare": {
        "summary": "The whole request a prepare body builds",
        "value": {"prepare": PREPARE["inline_model"]["value"]},
    },
}

MODEL: Examples = {
    "openai": {
        "summary": "An OpenAI model (the key stays in the server's environment)",
        "value": {
            "context_window_tokens": 400_000,
            "max_output_tokens": 128_000,
            # gpt-5 takes at most 272 000 input tokens whatever the output limit (docs/models.md).
            "output_reserve_tokens": 32_768,
            "fixed_reserve_tokens": 95_232,
            "safety_margin_tokens": 2_000,
            "token_counter": "tiktoken:o200k_base",
            "provider": {
                "kind": "openai_chat",
                "base_url": "https://api.openai.com/v1",
                "model_name": "gpt-5",
                "api_key_env": "OPENAI_API_KEY",
            },
        },
    },
    "scripted": {
        "summary": "An offline scripted model that calls a tool, then answers",
        "value": {
            "context_window_tokens": 100_000,
            "max_output_tokens": 4_000,
            "provider": {
                "kind": "scripted",
                "script": [
                    {"tool_calls": [{"name": "read_file", "input": {"path": "README.md"}}]},
                    {"text": "README.md says to install with pip.", "finish_reason": "stop"},
                ],
            },
        },
    },
}

SESSION_CREATE: Examples = {
    "provided_workspace": {
        "summary": "A coding agent with one tool and a workspace the caller describes",
        "value": {
            "title": "Install docs",
            "model_id": "local",
            "summary_model_id": "local",
            "agent": {
                "system_prompt": "You are a careful coding agent.",
                "tools": [_READ_TOOL],
                "max_model_calls": 20,
                "doom_loop_threshold": 3,
            },
            "workspace": {
                "provided": {
                    "working_directory": "/home/dev/demo",
                    "repository_root": "/home/dev/demo",
                    "layout": ["src/", "README.md", "pyproject.toml"],
                    "agents_md": "Run the tests with `pytest` before you finish.",
                    "skills": [
                        {
                            "name": "release-notes",
                            "description": "Write release notes from the git log.",
                            "path": "/home/dev/skills/release-notes/SKILL.md",
                            "body": "Read `git log` since the last tag and group changes.",
                        }
                    ],
                }
            },
            "sandbox": {"mode": "auto", "available": True},
            "disabled_skills": [],
        },
    },
    "minimal": {
        "summary": "The least a session needs",
        "value": {"model_id": "local", "agent": {"system_prompt": "You are a helpful agent."}},
    },
}

SESSION_PATCH: Examples = {
    "rename_and_sandbox": {
        "summary": "Rename the session and make bash ask before writing the workspace",
        "value": {"title": "Install docs (review)", "sandbox": {"mode": "accept_edits"}},
    },
}

APPEND: Examples = {
    "tool_round_trip": {
        "summary": "A user request, the model's tool call and its result",
        "value": {
            "messages": [
                {k: v for k, v in message.items() if k != "origin"} for message in _CONVERSATION
            ]
        },
    },
}

SESSION_PREPARE: Examples = {
    "openai_body": {"summary": "Encoded for OpenAI Chat", "value": {"encode": "openai_chat"}},
}

TURN_START: Examples = {
    "text": {
        "summary": "A user request",
        "value": {
            "client_request_id": "req-2026-12-01-0001",
            "input": [{"type": "text", "text": "Summarize what README.md says about installing."}],
        },
    },
}

TOOL_RESULTS: Examples = {
    "success": {
        "summary": "The result of the pending read_file call",
        "value": {
            "results": [
                {
                    "tool_call_id": "call_1",
                    "state": "success",
                    "output": [
                        {"type": "text", "text": "# Demo\n\nInstall with `pip install demo`."}
                    ],
                    "artifacts": [],
                }
            ]
        },
    },
}

AGENT_MESSAGE: Examples = {
    "final_answer": {
        "summary": "A sub-agent reports back",
        "value": {
            "task": "Check the changelog for breaking changes",
            "kind": "final_answer",
            "body": "No breaking changes since 1.4; two deprecations are listed under 1.5.",
            "agent_message_id": "am-changelog-1",
        },
    },
}

PIN: Examples = {
    "constraint": {
        "summary": "A red line the user drew",
        "value": {
            "kind": "constraint",
            "text": "Never modify anything in the production database.",
        },
    },
    "decision": {
        "summary": "A decision that replaced an earlier one",
        "value": {"kind": "decision", "text": "Use a PostgreSQL advisory lock, not Redis."},
    },
}

COMPACT: Examples = {
    "service_summary": {"summary": "Summarize with the session's summary model", "value": {}},
}

REWIND: Examples = {
    "rewind": {
        "summary": "Reinstall an earlier checkpoint (an id from GET .../compactions)",
        "value": {"compaction_id": "cmp-0123456789abcdef0123456789abcdef"},
    },
}

ITEMS: Examples = {
    "tool_round": {
        "summary": "A user question, the model's function call and its output",
        "value": {
            "format": "openai_responses",
            "items": [
                {"role": "user", "content": "What is the weather in Paris?"},
                {
                    "type": "function_call",
                    "call_id": "call_weather_1",
                    "name": "get_weather",
                    "arguments": '{"city": "Paris"}',
                },
                {
                    "type": "function_call_output",
                    "call_id": "call_weather_1",
                    "output": "Sunny, 21 °C",
                },
                {"role": "assistant", "content": "It is sunny in Paris, 21 °C."},
            ],
        },
    },
}

POP: Examples = {
    "pop": {"summary": "Take back the last item", "value": {"format": "openai_responses"}},
}

API_KEY: Examples = {
    "tenant": {
        "summary": "A key for one calling service (its own sessions and models)",
        "value": {"tenant_id": "billing-agent", "scope": "tenant", "name": "billing, production"},
    },
    "admin": {
        "summary": "A second admin key (manages keys and shared models)",
        "value": {"tenant_id": "platform", "scope": "admin", "name": "platform on-call"},
    },
}

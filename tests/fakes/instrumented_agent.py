"""A small support agent, instrumented the way a team would instrument one: the OpenAI SDK, an instrumentation of
it, and the OpenTelemetry SDK's OTLP/HTTP exporter, configured by the standard environment variables
(OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME, and for the official instrumentation
OTEL_SEMCONV_STABILITY_OPT_IN, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT).

    python -m tests.fakes.instrumented_agent --base-url http://127.0.0.1:PORT/v1 --conversation ID [--regenerate]
        [--convention genai|openinference]

`genai` (the default) is the official `opentelemetry-instrumentation-openai-v2`, with an `execute_tool` span per
tool call from opentelemetry-util-genai's handler and the session as `gen_ai.conversation.id`, and log records
exported by the SDK's OTLP/HTTP log exporter (where the messages go with
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only); `openinference` is
`openinference-instrumentation-openai` in its defaults, with a TOOL span per tool call as agent frameworks
record them and the session as `session.id` (OpenInference's `using_session`).

It answers two user turns, running the `order_status` tool when the model asks for it, with `--regenerate` asks
for the last answer twice and keeps the second, then prints the messages it kept, as JSON, on stdout.
"""

import argparse
import contextlib
import json
from collections.abc import Callable

from openai import OpenAI
from openinference.instrumentation import OITracer, TraceConfig, using_session
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.util.genai.handler import TelemetryHandler

SYSTEM = "You are the support agent of Northwind. Look orders up before you answer."
USER_TURNS = ["Where is my order 1182?", "Thanks. Can you also check order 1183?"]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "order_status",
            "description": "The shipping status of an order",
            "parameters": {"type": "object", "properties": {"order": {"type": "integer"}}, "required": ["order"]},
        },
    }
]


class ConversationId(SpanProcessor):
    """Puts the session's `gen_ai.conversation.id` on every span, as agents do with their session id (the
    instrumentation of the model calls cannot know it)."""

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id

    def on_start(self, span, parent_context=None) -> None:
        span.set_attribute("gen_ai.conversation.id", self.conversation_id)


def order_status(order: int) -> dict:
    return {"order": order, "status": "shipped", "carrier": "DHL"}


# Runs a tool call: (tool name, call id, arguments, the function computing the result) -> the result.
ToolRunner = Callable[[str, str, str, Callable[[], str]], str]


def genai_instrumentation(
    provider: TracerProvider, logs: LoggerProvider, conversation: str
) -> tuple[contextlib.AbstractContextManager, ToolRunner]:
    provider.add_span_processor(ConversationId(conversation))
    OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=logs)
    telemetry = TelemetryHandler(tracer_provider=provider, logger_provider=logs)

    def run_tool(name: str, call_id: str, arguments: str, compute: Callable[[], str]) -> str:
        with telemetry.tool(name) as tool:
            tool.tool_call_id = call_id
            tool.arguments = arguments
            tool.tool_result = compute()
        return tool.tool_result

    return telemetry.invoke_local_agent(agent_name="support"), run_tool


def openinference_instrumentation(
    provider: TracerProvider, logs: LoggerProvider, conversation: str
) -> tuple[contextlib.AbstractContextManager, ToolRunner]:
    OpenInferenceInstrumentor().instrument(tracer_provider=provider)
    tracer = OITracer(provider.get_tracer("support-agent"), config=TraceConfig())  # carries using_session's id

    def run_tool(name: str, call_id: str, arguments: str, compute: Callable[[], str]) -> str:
        with tracer.start_as_current_span(name, openinference_span_kind="tool") as span:
            span.set_tool(name=name, parameters=arguments)
            span.set_attributes({"tool.id": call_id, "input.value": arguments})
            result = compute()
            span.set_attribute("output.value", result)
        return result

    return using_session(conversation), run_tool


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--conversation", required=True)
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--convention", choices=["genai", "openinference"], default="genai")
    args = parser.parse_args()

    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    logs = LoggerProvider(resource=provider.resource)
    logs.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    instrument = genai_instrumentation if args.convention == "genai" else openinference_instrumentation
    session, run_tool = instrument(provider, logs, args.conversation)
    client = OpenAI(base_url=args.base_url, api_key="agent-key", max_retries=0)

    messages: list[dict] = [{"role": "system", "content": SYSTEM}]
    with session:
        for turn, text in enumerate(USER_TURNS):
            messages.append({"role": "user", "content": text})
            while True:
                reply = client.chat.completions.create(model="support-model", messages=messages, tools=TOOLS)
                message = reply.choices[0].message
                if args.regenerate and turn == len(USER_TURNS) - 1 and not message.tool_calls:
                    # The user did not like the answer: the same history again, and the second reply is kept.
                    reply = client.chat.completions.create(model="support-model", messages=messages, tools=TOOLS)
                    message = reply.choices[0].message
                messages.append(message.model_dump(include={"role", "content", "tool_calls"}, exclude_none=True))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    arguments = call.function.arguments
                    result = run_tool(
                        call.function.name,
                        call.id,
                        arguments,
                        lambda arguments=arguments: json.dumps(order_status(**json.loads(arguments))),
                    )
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    provider.shutdown()  # flushes every span, then every log record, to the exporters before the process ends
    logs.shutdown()
    print(json.dumps(messages))


if __name__ == "__main__":
    main()

"""The instruct model's chat template (ChatML, Qwen2.5's shape) and its rendering as
Hugging Face's transformers renders it, for tools/train_chat.py and its model card.
"""

from __future__ import annotations

import chat_dataset as data

# Qwen2's chat template without the tool branches; Qwen2.5's shape: a default system
# message when the conversation has none, <|im_start|>assistant\n as generation prompt.
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "    {{- '<|im_start|>system\\n" + data.DEFAULT_SYSTEM + "<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if not (loop.first and message['role'] == 'system') %}\n"
    "        {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n")


def chat_template():
    """The template compiled as transformers compiles it (ImmutableSandboxedEnvironment,
    trim_blocks, lstrip_blocks, loopcontrols, raise_exception)."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(CHAT_TEMPLATE)


_TEMPLATE = None


def render(messages: list[dict], add_generation_prompt: bool) -> str:
    global _TEMPLATE
    if _TEMPLATE is None:
        _TEMPLATE = chat_template()
    return _TEMPLATE.render(messages=messages, add_generation_prompt=add_generation_prompt,
                            eos_token="<|im_end|>", bos_token=None, pad_token="<|endoftext|>")

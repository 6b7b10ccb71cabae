/**
 * @rx/llm: model adapters for the rx kernel. OpenAI-compatible Chat Completions servers
 * (OpenAI, Ollama, llama.cpp server, vLLM, LM Studio), and a bridge from @effect/ai providers.
 */
export * as AiBridge from "./AiBridge.js"
export * as ChatCompletions from "./ChatCompletions.js"
export * as OpenAiCompatible from "./OpenAiCompatible.js"
export * as Retry from "./Retry.js"

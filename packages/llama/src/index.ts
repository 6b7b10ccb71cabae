/**
 * @rx/llama: a model inside the rx process. A GGUF file run by llama.cpp (node-llama-cpp), every
 * answer constrained by a grammar built from the tool specs; no server.
 */
export * as Conversation from "./Conversation.js"
export * as Grammar from "./Grammar.js"
export * as Install from "./Install.js"
export * as LlamaCpp from "./LlamaCpp.js"
export * as TinyGguf from "./TinyGguf.js"

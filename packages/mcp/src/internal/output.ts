/**
 * An MCP tool result as rx records it: text kept up to a byte budget (the rest cut, and said
 * so), binary content described rather than stored, structured content kept when it fits.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"

type Content = CallToolResult["content"][number]

/** One content item as recorded; `budget` is what text may still take, in UTF-16 units. */
const item = (content: Content, budget: { left: number }): Record<string, unknown> => {
  const text = (value: string) => {
    const kept = value.length <= budget.left ? value : value.slice(0, Math.max(0, budget.left))
    budget.left -= kept.length
    return kept.length === value.length ? { text: value } : { text: kept, truncated: true, chars: value.length }
  }
  switch (content.type) {
    case "text":
      return { type: "text", ...text(content.text) }
    case "image":
    case "audio":
      // Base64 media would fill the log and the prompt: its kind and size are recorded instead.
      return { type: content.type, mimeType: content.mimeType, bytes: Math.floor((content.data.length * 3) / 4) }
    case "resource": {
      const resource = content.resource
      return "text" in resource && typeof resource.text === "string"
        ? { type: "resource", uri: resource.uri, ...text(resource.text) }
        : { type: "resource", uri: resource.uri, mimeType: resource.mimeType, bytes: "blob" in resource && typeof resource.blob === "string" ? Math.floor((resource.blob.length * 3) / 4) : 0 }
    }
    case "resource_link":
      return { type: "resource_link", uri: content.uri, name: content.name }
    default:
      return { type: "unknown" }
  }
}

/** Levels of nesting a result may have; JSON that nests deeper is not recorded (nor can it be, safely). */
export const maxDepth = 100

/**
 * Whether `value` nests arrays and objects more than `limit` levels deep, found without
 * recursion (a result tens of thousands of levels deep would overflow the stack).
 */
export const tooDeep = (value: unknown, limit: number = maxDepth): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [current, depth] = stack.pop() ?? [undefined, 0]
    if (typeof current !== "object" || current === null) continue
    if (depth >= limit) return true
    for (const child of Array.isArray(current) ? current : Object.values(current)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1])
    }
  }
  return false
}

/** The result's content as recorded, within `maxChars` of text, and its structured content if it fits. */
export const record = (result: CallToolResult, maxChars: number): { readonly content: ReadonlyArray<unknown>; readonly structuredContent?: unknown } => {
  const budget = { left: maxChars }
  const content = result.content.map((c) => item(c, budget))
  const structured = result.structuredContent
  if (structured === undefined) return { content }
  const size = JSON.stringify(structured).length
  return size <= Math.max(0, budget.left) ? { content, structuredContent: structured } : { content, structuredContent: { truncated: true, chars: size } }
}

/** The text of a result, for an `isError` result's message. */
export const text = (result: CallToolResult, maxChars: number): string => {
  const parts = result.content.flatMap((c) => (c.type === "text" ? [c.text] : []))
  const joined = parts.join("\n").trim()
  return joined === "" ? "the tool reported an error without a message" : joined.length > maxChars ? `${joined.slice(0, maxChars)}...` : joined
}

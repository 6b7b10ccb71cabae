/** What the decoder needs of an offered tool: its name and the JSON Schema of its input (`@rx/kernel`'s `Tool.Spec` fits). */
export interface Spec {
  readonly name: string
  readonly parameters: { readonly [key: string]: unknown }
}

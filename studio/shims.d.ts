/** React is used only to mount GraphiQL (a React component) in the explorer's lazy chunk. */
declare module 'react' {
  export function createElement(type: unknown, props?: Record<string, unknown> | null, ...children: unknown[]): unknown;
}
declare module 'react-dom/client' {
  export function createRoot(el: Element): { render(node: unknown): void; unmount(): void };
}
declare module 'graphiql' {
  export const GraphiQL: unknown;
}
declare module '*.css';

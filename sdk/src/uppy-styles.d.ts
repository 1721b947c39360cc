// The bundle's build (scripts/build.mjs) resolves this module to the text of Uppy's style sheets.
declare module 'stowage:uppy-styles' {
  const css: string;
  export default css;
}

// The uploader as one file for pages without a build step (`dist/uploader.min.js`): Uppy, its
// styles (added to the document once, on the first createUploader), the Stowage helpers, and
// the Uppy classes a page needs to assemble its own Uppy with them.
import styles from 'stowage:uppy-styles';
import { type CreateUploaderOptions, createUploader as mount, type Uploader } from './uploader.ts';

export { default as AwsS3 } from '@uppy/aws-s3';
export { default as Uppy } from '@uppy/core';
export { default as Dashboard } from '@uppy/dashboard';
export { default as GoldenRetriever } from '@uppy/golden-retriever';
export { default as Tus } from '@uppy/tus';
export { default as Webcam } from '@uppy/webcam';
export { browserCredential, stowageMultipart, stowagePartSize, stowageTus } from './uppy.ts';
export type * from './uppy.ts';
export type * from './uploader.ts';

/** Adds Uppy's styles to the document (once); createUploader does it by itself. */
export function addUppyStyles(doc: Document = document): void {
  if (doc.getElementById('stowage-uppy-styles')) return;
  const style = doc.createElement('style');
  style.id = 'stowage-uppy-styles';
  style.textContent = styles;
  doc.head.appendChild(style);
}

export function createUploader(options: CreateUploaderOptions): Uploader {
  addUppyStyles();
  return mount(options);
}

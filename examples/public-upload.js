// The whole integration: one import, one call. Large files go multipart with progress.
import { Stowage } from '/dashboard/sdk.js';

document.getElementById('form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const file = document.getElementById('file').files[0];
  const stowage = new Stowage({ baseUrl: location.origin, apiKey: document.getElementById('key').value.trim() });
  const progress = document.getElementById('progress');
  const result = document.getElementById('result');
  try {
    const record = await stowage.uploadFile(file, file.name, {
      folder: 'from-the-web',
      onProgress: ({ loaded, total }) => {
        progress.max = total;
        progress.value = loaded;
      },
    });
    result.textContent = `Uploaded: ${record.url}`;
    result.dataset.fileNo = record.file_no;
  } catch (err) {
    result.textContent = `Failed: ${err.message}`;
  }
});

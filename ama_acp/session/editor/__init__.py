"""The editor seam: the editor as a typed client, permission questions, where tools work, updates out."""

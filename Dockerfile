FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# A CUDA build of torch for GPU workers; pin the index to your CUDA version if it differs.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY . .
EXPOSE 8000
# docker-compose.yml's web service migrates first; this is the same server without it
CMD ["gunicorn", "-c", "python:webapp.core.gunicorn_conf", "webapp.wsgi", "--bind", "0.0.0.0:8000"]

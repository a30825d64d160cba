# One image for every Rounds service; the compose file picks the command.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY foundation ./foundation
COPY rounds ./rounds
COPY fhir_mapper ./fhir_mapper
COPY events ./events
COPY services ./services
COPY contracts ./contracts
COPY migrations ./migrations
RUN pip install --no-cache-dir -e .
ENV ROUNDS_DATABASE_URL=sqlite:////data/rounds.sqlite
EXPOSE 8080
CMD ["rounds", "--help"]
